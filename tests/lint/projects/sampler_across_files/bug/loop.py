def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for batch in loader:
            optimizer.zero_grad()
            model(batch).sum().backward()
            optimizer.step()
