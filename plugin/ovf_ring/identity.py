"""Which process a ring belongs to, in words: under torchrun every rank has its
own ring, and each command that reads one says whose it is."""


def rank_text(header):
    """ "rank 1 of 2, local rank 1", or "" outside torch.distributed (RANK unset)."""
    if header.rank < 0:
        return ""
    text = f"rank {header.rank} of {header.world_size}"
    if header.local_rank >= 0 and header.local_rank != header.rank:
        text += f", local rank {header.local_rank}"
    return text


def device_text(header):
    return "cpu" if header.device_index < 0 else f"cuda:{header.device_index}"


def process_text(header):
    """ "process 1234 (rank 1 of 2, cpu)"."""
    return f"process {header.pid} ({rank_text(header) or 'not distributed'}, {device_text(header)})"
