"""Tolerance: error budgets, the models, the aggregate check, the compiled judge."""
