def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            optimizer.zero_grad()
            model(batch).sum().backward()
            optimizer.step()
