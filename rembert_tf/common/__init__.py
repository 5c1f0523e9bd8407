"""What every area of rembert_tf shares: file I/O on any filesystem, outputs and
their locks, the error base classes, how a command runs and what it prints."""
