"""zihangdai/mos: main.py itself, run as the README runs it (python main.py --data ... --single_gpu) but with
--cuda (which turns CUDA off), a tiny MoS LSTM (3 WeightDrop LSTM layers, 3 experts) and --epochs 1, over a
synthetic corpus of random words written to a temporary folder. main.py's own statements run in order, with
its own train(), evaluate() and save_checkpoint() for one epoch; only the part after the epoch loop (reload
the best model, move it to the GPU with DataParallel(...).cuda(), test) is left out."""
import ast
import os
import sys
import tempfile

import smoke_support

import torch  # noqa: E402

torch.manual_seed(0)
work = tempfile.mkdtemp(prefix="revive-mos-")
corpus_dir = os.path.join(work, "data")
os.mkdir(corpus_dir)
for split, lines in (("train", 60), ("valid", 12), ("test", 12)):
    words = torch.randint(0, 40, (lines, 10))
    with open(os.path.join(corpus_dir, split + ".txt"), "w", encoding="utf-8") as f:
        for row in words.tolist():
            f.write(" " + " ".join(f"w{w}" for w in row) + " \n")

sys.argv = ["main.py", "--data", corpus_dir, "--save", os.path.join(work, "EXP"), "--cuda", "--epochs", "1",
            "--emsize", "16", "--nhid", "24", "--nhidlast", "16", "--n_experts", "3", "--batch_size", "4",
            "--bptt", "10", "--max_seq_len_delta", "5", "--lr", "20", "--single_gpu"]

main_path = os.path.abspath("main.py")
with open(main_path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), filename=main_path)
# main.py's statements up to and including its epoch loop (the try: ... except KeyboardInterrupt: block).
last = max(i for i, node in enumerate(tree.body) if isinstance(node, ast.Try))
module = ast.Module(body=tree.body[: last + 1], type_ignores=[])
namespace = {"__name__": "__main__", "__file__": main_path}
exec(compile(module, main_path, "exec"), namespace)

smoke_support.succeeded(namespace["stored_loss"])
