# System-wide .bashrc of the workspace image, read by interactive shells.
[ -z "$PS1" ] && return

shopt -s checkwinsize histappend
HISTSIZE=10000
HISTFILESIZE=20000

PS1='\[\e[32m\]\u@\h\[\e[0m\]:\[\e[34m\]\w\[\e[0m\]\$ '
alias ls='ls --color=auto'
alias ll='ls -alF'
alias grep='grep --color=auto'

# Tab completion (BitaHub users miss it most when a terminal falls back to sh).
if ! shopt -oq posix && [ -f /usr/share/bash-completion/bash_completion ]; then
  . /usr/share/bash-completion/bash_completion
fi
