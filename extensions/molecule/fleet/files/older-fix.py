"""Marks the fleet test's release beside the main one: its own patch, whose content is part of that release's id."""
