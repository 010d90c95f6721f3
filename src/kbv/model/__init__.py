"""The data model: frozen records with units in their field names, and their JSON codec (no torch)."""
