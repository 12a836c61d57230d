package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Shell completion: `completion SHELL` prints a script that asks the CLI itself what may come
// next (`__complete WORD... PARTIAL`), so the script never goes stale. __complete answers as
// cobra-built tools (kubectl among them) do: one candidate a line, then ":<directive>" (4: no
// file names), which is what kubectl expects from a plugin's kubectl_complete-<plugin> helper.

// completeCmd is the hidden command the completion scripts call.
const completeCmd = "__complete"

// subcommands are what may follow each command ("" is the CLI itself).
var subcommands = map[string][]string{
	"":            {"why", "simulate", "tap", "deadletters", "preflight", "version", "completion", "help"},
	"why":         {"node", "nodeclaim", "pod"},
	"deadletters": {"ls", "replay"},
	"completion":  {"bash", "zsh", "fish", "kubectl"},
}

// noFlags are the commands that take no flags at all.
var noFlags = map[string]bool{"version": true, "completion": true, "help": true}

// complete prints the candidates for the last word of args.
func complete(args []string, w io.Writer) error {
	partial := ""
	if len(args) > 0 {
		partial, args = args[len(args)-1], args[:len(args)-1]
	}
	var words []string // the command words so far, flags left out
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			words = append(words, a)
		}
	}
	// cmd is the command the words name ("deadletters ls"); once a word is no subcommand (a
	// node's name), nothing but flags may follow.
	cmd, last, commandsOnly := "", "", true
	for _, word := range words {
		if !commandsOnly || !slices.Contains(subcommands[last], word) {
			commandsOnly = false
			continue
		}
		cmd, last = strings.TrimSpace(cmd+" "+word), word
	}
	var candidates []string
	switch {
	case strings.HasPrefix(partial, "-"):
		if cmd != "" && !noFlags[cmd] && len(subcommands[last]) == 0 {
			candidates = commandFlagNames(cmd)
		}
	case commandsOnly:
		candidates = subcommands[last]
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, partial) {
			fmt.Fprintln(w, c)
		}
	}
	fmt.Fprintln(w, ":4")
	return nil
}

// commandFlagNames are the flags a command's -h lists (its own and the shared ones, not the
// old names): the command parses -h before it does anything else.
func commandFlagNames(cmd string) []string {
	var help bytes.Buffer
	_ = dispatch(context.Background(), append(strings.Fields(cmd), "-h"), io.Discard, &help)
	var out []string
	for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
		out = append(out, "--"+m[1])
	}
	return out
}

// flagLine is a flag in the flag package's usage: "  -name type".
var flagLine = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)(?: |$)`)

// completionCmd prints the completion script for a shell.
func completionCmd(args []string, w io.Writer) error {
	if len(args) != 1 {
		return usagef("completion needs one shell: bash, zsh, fish or kubectl")
	}
	bin := strings.ReplaceAll(prog, " ", "-") // kubectl fleetwright → the plugin binary kubectl-fleetwright
	fn := "_" + strings.ReplaceAll(bin, "-", "_")
	switch args[0] {
	case "bash", "zsh":
		script := fmt.Sprintf(`# %[1]s completion for %[3]s. Load it with: source <(%[2]s completion %[3]s)
%[4]s_complete() {
  local IFS=$'\n'
  COMPREPLY=( $(%[1]s %[5]s "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | grep -v '^:') )
}
complete -o default -F %[4]s_complete %[1]s
`, bin, prog, args[0], fn, completeCmd)
		if args[0] == "zsh" {
			script = "autoload -U +X bashcompinit && bashcompinit\n" + script
		}
		fmt.Fprint(w, script)
	case "fish":
		fmt.Fprintf(w, "# %[1]s completion for fish. Load it with: %[2]s completion fish | source\ncomplete -c %[1]s -f -a '(%[1]s %[3]s (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null | string match -v -r \"^:\")'\n",
			bin, prog, completeCmd)
	case "kubectl":
		// kubectl (1.26+) completes `kubectl fleetwright ...` by running kubectl_complete-fleetwright
		// from PATH with the words after the plugin's name.
		fmt.Fprintf(w, "#!/bin/sh\n# kubectl runs this for `kubectl fleetwright <TAB>`: save it on PATH as kubectl_complete-fleetwright, executable.\nexec kubectl-fleetwright %s \"$@\"\n", completeCmd)
	default:
		return usagef("completion %s: want bash, zsh, fish or kubectl", args[0])
	}
	return nil
}

// Commands are the CLI's commands, each as the words that name it ("why node", "tap"), for
// documentation checks.
func Commands() []string {
	var out []string
	for _, c := range subcommands[""] {
		if subs := subcommands[c]; len(subs) > 0 && c != "completion" {
			for _, s := range subs {
				out = append(out, c+" "+s)
			}
			continue
		}
		out = append(out, c)
	}
	return out
}
