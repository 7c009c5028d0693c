# bash completion for urnic (installed as $datadir/bash-completion/completions/urnic)
_urnic() {
  local cur prev words cword
  _init_completion || return
  # The commands and each command's options come from urnic's own help
  # (`urnic help`, `urnic CMD --help`), so a new command or option needs no
  # change here; only what completes an option's value is written out.
  local commands
  commands=$(urnic help 2>/dev/null | sed -nE 's/^  ([^ ]*\/)?urnic ([a-z][-a-z]*).*/\2/p' | sort -u)
  if ((cword == 1)); then
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    return
  fi
  case ${words[1]} in
    run|sysfs-run)
      # after "--": complete the program and its arguments as a command line
      local i
      for ((i = 2; i < cword; i++)); do
        if [[ ${words[i]} == -- ]]; then
          _command_offset $((i + 1))
          return
        fi
      done
      COMPREPLY=($(compgen -W "--" -- "$cur")) ;;
    conform)
      case $prev in
        --transport) COMPREPLY=($(compgen -W "roce2 iwarp" -- "$cur")); return ;;
        --iface) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")); return ;;
        --pcap) _filedir pcap; return ;;
        --junit) _filedir xml; return ;;
        --json|--report) _filedir; return ;;
        --peer|--suite|--device|--peer-ip|--mtu|--wait-ms|--iw-port) return ;;
      esac
      COMPREPLY=($(compgen -W "--peer --iface --transport --suite --device --peer-ip --mtu --wait-ms --iw-port --cc
                               --report --json --junit --pcap --list --verbose --help" -- "$cur")) ;;
    frame)
      if ((cword == 2)); then
        COMPREPLY=($(compgen -W "decode check" -- "$cur"))
      elif [[ ${words[2]} == check ]]; then
        case $prev in
          --junit) _filedir xml; return ;;
          --min-retry-us) return ;;
          --pmtu) COMPREPLY=($(compgen -W "256 512 1024 2048 4096" -- "$cur")); return ;;
        esac
        if [[ $cur == -* ]]; then
          COMPREPLY=($(compgen -W "--json --junit --min-retry-us --pmtu --help" -- "$cur"))
        else
          _filedir pcap
        fi
      elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "--verbose --help" -- "$cur"))
      else
        _filedir pcap
      fi ;;
    status)  # urnicd --status: its usage also lists the daemon's own options
      COMPREPLY=($(compgen -W "--json --runtime-dir" -- "$cur")) ;;
    *)
      case $prev in
        --runtime-dir) _filedir -d; return ;;
        -w|--write) _filedir pcap; return ;;
      esac
      [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$(_parse_help urnic "${words[1]} --help")" -- "$cur")) ;;
  esac
} &&
  complete -F _urnic urnic
