"""Tests of the broker package."""
