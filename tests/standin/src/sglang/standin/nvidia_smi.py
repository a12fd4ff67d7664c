"""`nvidia-smi` of the SGLang stand-in (test double): GPUs as the stand-in server holds them.

Answers the forms the project uses, in the real tool's output format:
  nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,power.draw --format=csv,noheader,nounits
  nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits
  nvidia-smi            (the human table, with the processes section)
  nvidia-smi -L
Other query fields of the same families work too; anything else is refused as the
real tool refuses it. Numbers come from the state directory (see gpustate.py).
"""
import sys
import time

from sglang.standin import settings as settings_mod
from sglang.standin.gpustate import gpu_uuid, gpu_views, read_holders

GPU_FIELDS = {
    "index": ("", lambda v, s: str(v.index)),
    "uuid": ("", lambda v, s: v.uuid),
    "gpu_uuid": ("", lambda v, s: v.uuid),
    "name": ("", lambda v, s: s.gpu_name),
    "gpu_name": ("", lambda v, s: s.gpu_name),
    "pci.bus_id": ("", lambda v, s: _bus_id(v.index)),
    "memory.used": ("MiB", lambda v, s: str(v.mem_used_mib)),
    "memory.total": ("MiB", lambda v, s: str(v.mem_total_mib)),
    "memory.free": ("MiB", lambda v, s: str(v.mem_total_mib - v.mem_used_mib)),
    "utilization.gpu": ("%", lambda v, s: str(v.util_pct)),
    "power.draw": ("W", lambda v, s: f"{v.power_w:.2f}"),
    "power.limit": ("W", lambda v, s: f"{s.gpu_power_limit_w:.2f}"),
    "temperature.gpu": ("", lambda v, s: str(30 + v.util_pct // 3)),
    "driver_version": ("", lambda v, s: s.driver_version),
}
APP_FIELDS = {
    "pid": ("", lambda h, s: str(h.pid)),
    "gpu_uuid": ("", lambda h, s: gpu_uuid(h.gpu)),
    "gpu_name": ("", lambda h, s: s.gpu_name),
    "gpu_bus_id": ("", lambda h, s: _bus_id(h.gpu)),
    "process_name": ("", lambda h, s: _process_name(h.pid)),
    "name": ("", lambda h, s: _process_name(h.pid)),
    "used_memory": ("MiB", lambda h, s: str(h.mem_mib)),
    "used_gpu_memory": ("MiB", lambda h, s: str(h.mem_mib)),
}
INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def _bus_id(index):
    return f"00000000:{0x18 + index * 0x10:02X}:00.0"


def _process_name(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode("utf-8", "replace") or "[Not Found]"
    except OSError:
        return "[Not Found]"


def _csv(rows, fields, table, fmt):
    opts = set(fmt.split(","))
    if not opts <= {"csv", "noheader", "nounits"} or "csv" not in opts:
        sys.stderr.write(f'"{fmt}" is not a valid format.\n')
        return 2
    for f in fields:
        if f not in table:
            sys.stdout.write(f'Field "{f}" is not a valid field to query.\n\n')
            return 2
    out = []
    if "noheader" not in opts:
        out.append(", ".join(f + (f" [{table[f][0]}]" if table[f][0] and "nounits" not in opts else "")
                             for f in fields))
    for r in rows:
        vals = []
        for f in fields:
            unit, get = table[f]
            v = get(*r)
            if unit and "nounits" not in opts:
                v = f"{v} {unit}" if unit != "MiB" else f"{v} MiB"
            vals.append(v)
        out.append(", ".join(vals))
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


def _row(*cells):
    return "|" + "|".join(cells) + "|"


def _table(s, views, held):
    w = 91
    rule = "+" + "-" * (w - 2) + "+"
    sep = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    lines = [time.strftime("%a %b %d %H:%M:%S %Y").ljust(w), rule]
    head = f" NVIDIA-SMI {s.driver_version:<22}Driver Version: {s.driver_version:<15}CUDA Version: {s.cuda_version}"
    lines += [_row(head.ljust(w - 2)), sep,
              _row(" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ", " Volatile Uncorr. ECC "),
              _row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ", " GPU-Util  Compute M. "),
              _row(" " * 41, " " * 24, "               MIG M. "),
              "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for v in views:
        name = s.gpu_name if len(s.gpu_name) <= 25 else s.gpu_name[:22] + "..."
        pwr = f"{v.power_w:.0f}W / {s.gpu_power_limit_w:.0f}W"
        mem = f"{v.mem_used_mib}MiB / {v.mem_total_mib}MiB"
        lines += [_row(f" {v.index:3d}  {name:<25}       On ", f"   {_bus_id(v.index)} Off ", f"{0:>21} "),
                  _row(f" N/A   {30 + v.util_pct // 3:2d}C    P0 {pwr:>23} ", f"{mem:>23} ",
                       f"{v.util_pct:>7d}%      Default "),
                  _row(" " * 41, " " * 24, "             Disabled "), sep]
    lines += [" " * w, rule, _row(" Processes:".ljust(w - 2)),
              _row("  GPU   GI   CI              PID   Type   Process name                        GPU Memory ".ljust(w - 2)),
              _row("        ID   ID                                                               Usage      ".ljust(w - 2)),
              "|" + "=" * (w - 2) + "|"]
    if not held:
        lines.append(_row("  No running processes found".ljust(w - 2)))
    for h in sorted(held, key=lambda h: (h.gpu, h.pid)):
        pname = _process_name(h.pid)[:36]
        lines.append(_row(f"  {h.gpu:3d}   N/A  N/A  {h.pid:>13}      C   {pname:<36} {h.mem_mib:>6}MiB ".ljust(w - 2)))
    lines.append(rule)
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        s = settings_mod.load()
    except (ValueError, OSError) as e:
        sys.stderr.write(f"nvidia-smi (SGLang stand-in): bad configuration: {e}\n")
        return 9
    query_gpu = query_apps = fmt = None
    list_gpus = False
    for a in argv:
        if a.startswith("--query-gpu="):
            query_gpu = a.split("=", 1)[1]
        elif a.startswith("--query-compute-apps="):
            query_apps = a.split("=", 1)[1]
        elif a.startswith("--format="):
            fmt = a.split("=", 1)[1]
        elif a in ("-L", "--list-gpus"):
            list_gpus = True
        else:
            sys.stdout.write(INVALID)
            return 2
    if (query_gpu or query_apps) and not fmt or (query_gpu and query_apps) or (fmt and not (query_gpu or query_apps)):
        sys.stdout.write(INVALID)
        return 2
    held = read_holders(s.state_dir)
    views = gpu_views(s, held)
    if list_gpus:
        if query_gpu or query_apps:
            sys.stdout.write(INVALID)
            return 2
        for v in views:
            sys.stdout.write(f"GPU {v.index}: {s.gpu_name} (UUID: {v.uuid})\n")
        return 0
    if query_gpu:
        return _csv([(v, s) for v in views], [f.strip() for f in query_gpu.split(",")], GPU_FIELDS, fmt)
    if query_apps:
        apps = [(h, s) for h in sorted(held, key=lambda h: (h.gpu, h.pid)) if h.gpu < s.gpus]
        return _csv(apps, [f.strip() for f in query_apps.split(",")], APP_FIELDS, fmt)
    sys.stdout.write(_table(s, views, held))
    return 0


if __name__ == "__main__":
    sys.exit(main())
