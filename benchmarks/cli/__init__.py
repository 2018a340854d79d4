"""The command itself: how it stops when asked to (signals), whatever it runs."""
