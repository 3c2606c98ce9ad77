"""Optimization problems (optimizees) and their data, ported from the
original ``problems/`` package."""
