"""Trusted-side process handles: spawning the candidate and reference workers, deadlines, the
process jail's parent half, /proc readers and kbv's own memory footprint."""
