"""The write client: dedupe, tag, assign to file groups, write files, commit, roll back."""
