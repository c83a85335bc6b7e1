"""Marks a release built by the fleet roll-out test; its content is part of the release id."""
