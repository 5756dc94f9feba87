package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"
)

// output is the -o flag of a command that prints API objects, as kubectl
// get has it: a table by default, "wide" for more columns, and every
// printer of cli-runtime (json, yaml, name, jsonpath=..., jsonpath-file=...,
// go-template=..., go-template-file=...) on the objects themselves.
type output struct {
	print *genericclioptions.PrintFlags
}

// addOutput registers -o (and --template, --show-managed-fields) on c.
func addOutput(c *cobra.Command) *output {
	o := &output{print: genericclioptions.NewPrintFlags("").WithTypeSetter(cliScheme)}
	o.print.AddFlags(c)
	f := c.Flags().Lookup("output")
	f.Usage = "Output format: wide, or one of (" + strings.Join(o.print.AllowedFormats(), ", ") + "); a table when not given."
	return o
}

func (o *output) format() string { return *o.print.OutputFormat }

// table says whether the output is one of the command's own tables, and
// whether it is the wide one.
func (o *output) table() (yes, wide bool) {
	switch o.format() {
	case "":
		return true, false
	case "wide":
		return true, true
	}
	return false, false
}

// validate rejects an unknown format before the command reads anything.
func (o *output) validate(cmd string) error {
	if ok, _ := o.table(); ok {
		return nil
	}
	if _, err := o.print.ToPrinter(); err != nil {
		return fmt.Errorf("%s: -o %s: %w", cmd, o.format(), err)
	}
	return nil
}

// object prints obj with the printer -o names; -o name prints a list's
// items one by one, as kubectl does.
func (o *output) object(w io.Writer, obj runtime.Object) error {
	p, err := o.print.ToPrinter()
	if err != nil {
		return err
	}
	if o.format() != "name" || !meta.IsListType(obj) {
		return p.PrintObj(obj, w)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return fmt.Errorf("print the items of %T: %w", obj, err)
	}
	for _, item := range items {
		if err := p.PrintObj(item, w); err != nil {
			return err
		}
	}
	return nil
}

// reportFormats are the formats of a command that prints a report of its
// own rather than API objects.
const reportFormats = "text, json or yaml"

// checkReportFormat rejects a report format other than text, json or yaml.
func checkReportFormat(cmd, format string) error {
	switch format {
	case "text", "json", "yaml":
		return nil
	}
	return fmt.Errorf("%s: -o must be %s, not %q", cmd, reportFormats, format)
}

// report writes v as JSON or YAML; format is "json" or "yaml".
func report(w io.Writer, format string, v any) error {
	var b []byte
	var err error
	if format == "json" {
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode the report as %s: %w", format, err)
	}
	_, err = w.Write(b)
	return err
}
