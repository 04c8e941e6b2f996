"""Generated data and its readers: torch's and torchvision's API per release, signatures, version guards."""
