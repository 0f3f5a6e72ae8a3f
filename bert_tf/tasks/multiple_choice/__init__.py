"""Multiple choice (SWAG): `tools/run_classifier.py --task_name=swag` or `multiple_choice`."""
