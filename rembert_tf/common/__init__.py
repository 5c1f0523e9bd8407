"""What every area of rembert_tf shares: file I/O on any filesystem, the error base
class."""
