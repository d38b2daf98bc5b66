"""Indexes: tag incoming record keys with the file group that holds them."""
