"""Readers: turn files of any supported format into a numpy array plus its geometry."""
