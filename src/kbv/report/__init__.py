"""Outputs of a batch read from its store: HTML report, figures, CSV / Markdown / JSON exports."""
