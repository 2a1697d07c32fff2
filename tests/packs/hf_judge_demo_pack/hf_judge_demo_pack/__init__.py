"""A demo metric pack for hf-judge: its prompt files are in ``prompts/``."""
