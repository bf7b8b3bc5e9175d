"""Budgeted batch chat and embedding jobs with cost columns."""
