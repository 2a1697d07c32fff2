"""What a run produces: the scored splits and their errors split, the summary, filtering, the dataset card,
pictures, result folders and pushing to the Hub."""
