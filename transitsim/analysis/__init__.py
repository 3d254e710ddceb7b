"""What the replayed timelines mean: time-, steps- and bytes-to-loss, and the verdict in words."""
