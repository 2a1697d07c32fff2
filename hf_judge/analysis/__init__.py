"""Statistics of scores: agreement of a judge with labels or another judge, with bootstrap intervals."""
