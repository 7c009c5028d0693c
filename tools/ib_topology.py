#!/usr/bin/env python3
"""An InfiniBand fabric of urnic from a topology file in ibnetdiscover's
format (the one ibsim reads; docs/INFINIBAND.md, "A switch").

usage: ib_topology.py configs TOPOLOGY NET OUTDIR
           one urnic-switch config per Switch (OUTDIR/<name>.switch.json)
           and one urnicd config per Ca (OUTDIR/<name>.json), addresses
           NET.1, NET.2, ... for the CAs and NET.101, NET.102, ... for the
           switches in the file's order; prints "ca NAME ADDRESS" and
           "switch NAME ADDRESS" lines
       ib_topology.py compare TOPOLOGY DISCOVERED
           exit 0 when the links of DISCOVERED (ibnetdiscover's output)
           between nodes named by their node descriptions are the
           topology's, else the differences and exit 1

The format: a node line `Switch N "ID" # "NAME"` or `Ca 1 "ID" # "NAME"`,
then one line per cabled port `[P] "PEER-ID"[PEER-P] ...`. The names (the
quoted text after #) become the switches' NodeDescription and the CAs'
device names (hence their NodeDescription); without one the ID is used.
A switch port P is UDP port 5000 + P at the switch's address; a CA's
device is at its address:4791. CAs have one port (urnic's devices)."""
import json
import re
import sys

NODE = re.compile(r'^(Switch|Ca)\s+(\d+)\s+"([^"]+)"(?:.*#\s*"([^"]*)")?')
LINK = re.compile(r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+"([^"]+)"\[(\d+)\]')


def parse(path):
    """[(kind, ports, id, name, {port: (peer id, peer port)})] in file order."""
    nodes, cur = [], None
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        m = NODE.match(line)
        if m:
            cur = (m.group(1), int(m.group(2)), m.group(3), m.group(4) or m.group(3), {})
            nodes.append(cur)
            continue
        m = LINK.match(line)
        if m and cur is not None:
            cur[4][int(m.group(1))] = (m.group(2), int(m.group(3)))
    return nodes


def links(nodes):
    """The set of cables as frozensets of (node name, port)."""
    name = {n[2]: n[3] for n in nodes}
    out = set()
    for _, _, nid, nname, ports in nodes:
        for p, (peer, pp) in ports.items():
            out.add(frozenset([(nname, p), (name.get(peer, peer), pp)]))
    return out


def configs(topology, net, outdir):
    nodes = parse(topology)
    addr, n_ca, n_sw = {}, 0, 0
    for kind, nports, nid, _, ports in nodes:
        if kind == "Ca":
            if nports != 1 or set(ports) - {1}:
                sys.exit(f"ib_topology: CA {nid}: urnic's devices have one port")
            n_ca += 1
            addr[nid] = f"{net}.{n_ca}"
        else:
            n_sw += 1
            addr[nid] = f"{net}.{100 + n_sw}"
    kinds = {n[2]: n[0] for n in nodes}

    def end(nid, port):
        if nid not in addr:
            sys.exit(f"ib_topology: {nid} is cabled to but not described")
        return f"{addr[nid]}:{4791 if kinds[nid] == 'Ca' else 5000 + port}"

    for kind, nports, nid, name, ports in nodes:
        if kind == "Ca":
            peer = ports.get(1)
            dev = {"name": name, "link_layer": "infiniband", "address": addr[nid]}
            if peer:
                dev["ib_cable"] = {"peer": end(*peer)}
            with open(f"{outdir}/{name}.json", "w", encoding="utf-8") as f:
                json.dump({"devices": [dev]}, f)
            print(f"ca {name} {addr[nid]}")
        else:
            plist = [{"udp_port": 5000 + p, "peer": end(*ports[p])} if p in ports else None
                     for p in range(1, nports + 1)]
            with open(f"{outdir}/{name}.switch.json", "w", encoding="utf-8") as f:
                json.dump({"name": name, "address": addr[nid], "ports": plist}, f)
            print(f"switch {name} {addr[nid]}")


def compare(topology, discovered):
    want, got = links(parse(topology)), links(parse(discovered))
    for c in sorted(want - got, key=sorted):
        print("missing: " + " <-> ".join(f"{n}[{p}]" for n, p in sorted(c)))
    for c in sorted(got - want, key=sorted):
        print("extra: " + " <-> ".join(f"{n}[{p}]" for n, p in sorted(c)))
    return 0 if want == got else 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "configs":
        configs(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        return compare(sys.argv[2], sys.argv[3])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
