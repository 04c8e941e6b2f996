"""Values and domains: what an op is, the kind of a value (tensor, NumPy array, Python number),
conditions, fused-op and loss recognition, floating-point precision, fix builders."""
