# Runs the zsh completion function outside a real completion widget, with compadd, _describe and
# _files replaced by stubs that print the candidates, one per line (filtering by prefix is zsh's job).
# Usage: zsh -f zsh-complete.zsh SCRIPT WORD...   (the last WORD is the one being completed)
compdef() { :; }
compadd() { while [[ $1 == -* && $1 != -- ]]; do shift; done; [[ $1 == -- ]] && shift; print -rl -- "$@"; }
_describe() { local -a items; items=("${(@P)4}"); print -rl -- "${items[@]%%:*}"; }
_files() { print -r -- '<files>'; }
source $1; shift
words=("$@"); CURRENT=$#words; PREFIX=${words[-1]}
_kvb
