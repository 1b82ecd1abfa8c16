"""The one-command local stack (`./dev up`): a supervisor for the API and the workers, and the demo run."""
