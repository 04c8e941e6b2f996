def normalized_error(prediction, target):
    error = (prediction - target).pow(2).sum(1)
    return error / error.sum()
