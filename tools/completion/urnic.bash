# bash completion for urnic (installed as $datadir/bash-completion/completions/urnic)
_urnic() {
  local cur prev words cword
  _init_completion || return
  local commands="run env sysfs-run doctor status stats fault capture frame help"
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
    stats)
      case $prev in
        -d|--device) return ;;
      esac
      COMPREPLY=($(compgen -W "-d --device --json --watch --help" -- "$cur")) ;;
    fault)
      case $prev in
        -d|--device|--loss|--dup|--reorder|--corrupt|--delay-us|--seed|--qp) return ;;
      esac
      COMPREPLY=($(compgen -W "-d --device --loss --dup --reorder --corrupt --delay-us --seed --qp --clear --help" -- "$cur")) ;;
    capture)
      case $prev in
        -w) _filedir pcap; return ;;
        -d|--device|-c) return ;;
      esac
      COMPREPLY=($(compgen -W "-d --device -w -c --help" -- "$cur")) ;;
    frame)
      if ((cword == 2)); then
        COMPREPLY=($(compgen -W "decode" -- "$cur"))
      elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "--verbose --help" -- "$cur"))
      else
        _filedir pcap
      fi ;;
    status)
      COMPREPLY=($(compgen -W "--runtime-dir" -- "$cur")) ;;
  esac
} &&
  complete -F _urnic urnic
