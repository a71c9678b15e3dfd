"""Process-level plumbing shared by every command: atomic writes, signals, ranks, the allocator."""
