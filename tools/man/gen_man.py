#!/usr/bin/env python3
"""Render a man page from its one source, a small Markdown subset (tools/man/*.md).

usage: gen_man.py SOURCE.md OUTPUT [--help-from SCRIPT] [--config-from URNICD] [--version V]

The source's first line is "# name(section) -- summary". Then "## HEADING"
starts a section, a blank line ends a paragraph, lines indented by four
spaces are shown as typed, "- " starts a list item, `code` is bold, *word* is
italic. A line "{{COMMANDS}}" becomes the command list of SCRIPT (the help
text of tools/urnic, the comment block `urnic help` prints), so urnic(1) and
`urnic help` cannot disagree. A line "{{CONFIG}}" becomes what
`URNICD --print-config-schema` prints (Markdown in the same subset): the
daemon's configuration schema (engine/device/config_schema.cpp), so
urnicd(8) and the keys urnicd accepts cannot disagree.
"""
import argparse
import re
import subprocess
import sys


def escape(text):
    text = text.replace('\\', '\\e').replace('-', '\\-')
    text = re.sub(r'`([^`]+)`', lambda m: '\\fB' + m.group(1) + '\\fR', text)
    text = re.sub(r'(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])', lambda m: '\\fI' + m.group(1) + '\\fR', text)
    return text


def line(text):
    """A troff text line: one starting with . or ' would be a request."""
    text = escape(text)
    return '\\&' + text if text.startswith(('.', "'")) else text


def script_help(path):
    """The comment block after the shebang up to `set -euo`, as `urnic help` prints it."""
    out = []
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    for raw in lines[1:]:
        if raw.startswith('set -euo'):
            break
        if raw.startswith('#'):
            text = re.sub(r'^# ?', '', raw)
            # "tools/" goes: the description column stays where it was
            text = re.sub(r'^  tools/urnic (\S.*?\S)(  +)', lambda m: '  urnic ' + m.group(1) + m.group(2) + ' ' * 6, text)
            out.append(text.replace('tools/urnic', 'urnic'))
    while out and not out[0].strip():
        out.pop(0)
    return out[2:] if len(out) > 2 and not out[1].strip() else out  # drop the title line


def render(src, help_lines, version):
    lines = src.splitlines()
    m = re.match(r'#\s*(\S+)\((\d)\)\s*--\s*(.*)', lines[0])
    if not m:
        sys.exit('gen_man.py: the first line must be "# name(section) -- summary"')
    name, section, summary = m.groups()
    out = [f'.TH {name.upper()} {section} "" "urnic {version}" "urnic"',
           '.SH NAME', f'{escape(name)} \\- {escape(summary)}']
    in_pre = False
    for raw in lines[1:]:
        if raw.strip() == '{{COMMANDS}}':
            raw_block = ['    ' + h for h in help_lines]
        else:
            raw_block = [raw]
        for text in raw_block:
            if text.startswith('    ') and text.strip():
                if not in_pre:
                    out += ['.PP', '.RS 4', '.nf']
                    in_pre = True
                out.append(line(text[4:]))
                continue
            if in_pre and not text.strip():
                out.append('')  # blank line inside a block: keep it if the block goes on
                continue
            if in_pre:
                while out and out[-1] == '':
                    out.pop()
                out += ['.fi', '.RE']
                in_pre = False
            if text.startswith('## '):
                out.append('.SH ' + escape(text[3:].upper()))
            elif text.startswith('### '):
                out.append('.SS ' + escape(text[4:]))
            elif text.startswith('- '):
                out += ['.IP \\(bu 2', line(text[2:])]
            elif not text.strip():
                if out and out[-1] not in ('.PP',) and not out[-1].startswith(('.SH', '.SS')):
                    out.append('.PP')
            else:
                out.append(line(text.strip()))
    if in_pre:
        while out and out[-1] == '':
            out.pop()
        out += ['.fi', '.RE']
    # No paragraph break right before a heading or at the end.
    cleaned = []
    for i, l in enumerate(out):
        nxt = out[i + 1] if i + 1 < len(out) else '.SH'
        if l == '.PP' and (nxt.startswith(('.SH', '.SS', '.PP', '.IP')) or nxt == ''):
            continue
        if l == '' :
            cleaned.append('.sp')
            continue
        cleaned.append(l)
    return '\n'.join(cleaned) + '\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('source')
    ap.add_argument('output')
    ap.add_argument('--help-from')
    ap.add_argument('--config-from')
    ap.add_argument('--version', default='')
    a = ap.parse_args()
    with open(a.source, encoding='utf-8') as f:
        src = f.read()
    if '{{CONFIG}}' in src:
        if not a.config_from:
            sys.exit('gen_man.py: the source has {{CONFIG}} but no --config-from program')
        schema = subprocess.run([a.config_from, '--print-config-schema'], check=True, capture_output=True,
                                text=True).stdout
        src = src.replace('{{CONFIG}}\n', schema.rstrip('\n') + '\n')
    help_lines = script_help(a.help_from) if a.help_from else []
    if '{{COMMANDS}}' in src and not help_lines:
        sys.exit('gen_man.py: the source has {{COMMANDS}} but no --help-from script')
    with open(a.output, 'w', encoding='utf-8') as f:
        f.write(render(src, help_lines, a.version))


if __name__ == '__main__':
    main()
