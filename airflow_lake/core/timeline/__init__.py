"""Timeline: instants, the active timeline, payload (de)serialisers."""
