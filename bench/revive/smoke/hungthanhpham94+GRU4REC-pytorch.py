"""hungthanhpham94/GRU4REC-pytorch: main.py's main() (as `python main.py` runs it, the README's training command),
so the repository's own Dataset, GRU4REC, Optimizer, LossFunction (TOP1-max, the default) and Trainer.train
run for one epoch (--n_epochs 1) and the evaluation after it, with a small GRU, over synthetic click sessions
(SessionID,ItemID,Time) written as CSV files to a temporary folder."""
import os
import sys
import tempfile

import smoke_support

import torch  # noqa: E402

work = tempfile.mkdtemp(prefix="revive-gru4rec-")
generator = torch.Generator().manual_seed(0)


def write_sessions(path, n_sessions, first_session):
    rows = ["SessionID,ItemID,Time"]
    time = 1.0e9
    for s in range(n_sessions):
        length = int(torch.randint(2, 6, (1,), generator=generator))
        for item in torch.randint(0, 30, (length,), generator=generator).tolist():
            time += 1.0
            rows.append(f"{first_session + s},{1000 + item},{time}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


train_path = os.path.join(work, "train.csv")
write_sessions(train_path, 40, 1)
# every item appears in the training set, so the validation set's items all map through the training itemmap
with open(train_path, "a", encoding="utf-8") as f:
    f.write("".join(f"{900},{1000 + item},{2.0e9 + item}\n" for item in range(30)))
write_sessions(os.path.join(work, "valid.csv"), 20, 5000)

sys.argv = ["main.py", "--data_folder", work, "--train_data", "train.csv", "--valid_data", "valid.csv",
            "--checkpoint_dir", os.path.join(work, "checkpoint"), "--n_epochs", "1", "--batch_size", "8",
            "--hidden_size", "16"]

import main  # noqa: E402

main.main()

checkpoints = os.listdir(main.args.checkpoint_dir)
print("checkpoints:", sorted(checkpoints))
smoke_support.succeeded(torch.load(os.path.join(main.args.checkpoint_dir, "model_00000.pt"), weights_only=False)["loss"])
