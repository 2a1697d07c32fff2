"""Judging a row: metrics and their prompt files, rendering, images, reply validation, probability-weighted
scores, and how several replies of a row combine (samples, panels)."""
