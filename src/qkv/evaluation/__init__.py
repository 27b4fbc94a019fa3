"""Metrics and evaluation runs."""
