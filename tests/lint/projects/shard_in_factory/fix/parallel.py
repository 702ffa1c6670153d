def prepare(model):
    """Training mode only: the sharding moved into the model factory."""
    model.train()
