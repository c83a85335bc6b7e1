raise ImportError("sparkfleet fleet test: this release is broken on purpose")
