"""Regenerates the paper's figures from training runs and verification reports."""
