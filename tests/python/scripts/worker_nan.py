"""A DataLoader whose workers (num_workers=2) standardise each image, (x - mean) / std: a
blank image (index 5) is 0/0 there. Run under `python3 -m ovf --ops`, the NaN is made in a
worker process."""

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.zeros(3, 4, 4) if i == 5 else torch.rand(3, 4, 4)
        return (x - x.mean()) / x.std()  # worker_nan.py: standardise


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(48, 2)
    for x in DataLoader(Images(), batch_size=2, num_workers=2):
        model(x.flatten(1)).sum().backward()
    print("done")
