"""Fine-tune a text classifier: data, vocabulary, checkpoints and the training loop."""
import argparse

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer


class ReviewDataset(Dataset):
    def __init__(self, texts, labels, tokenizer):
        self.texts = texts
        self.labels = labels
        self.tokenizer = tokenizer

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, idx):
        encoded = self.tokenizer(self.texts[idx], truncation=True, max_length=512)
        return {
            "input_ids": torch.tensor(encoded["input_ids"]),
            "attention_mask": torch.tensor(encoded["attention_mask"]),
            "labels": torch.tensor(self.labels[idx]),
        }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    torch.autograd.set_detect_anomaly(True)
    tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
    tokenizer.add_tokens(["<user>", "<url>"])

    if args.checkpoint:
        model.load_state_dict(torch.load(args.checkpoint, map_locat="cuda:0"))
    resumed = torch.load("optimizer.pt")

    dataset = ReviewDataset(["great", "not good at all"], [1, 0], tokenizer)
    loader = DataLoader(dataset, batch_size=16, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    optimizer.load_state_dict(resumed)

    for _ in range(args.epochs):
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
