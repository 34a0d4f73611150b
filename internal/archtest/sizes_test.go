package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// sizeProblems lists where the Go source src, of file name, goes over
// maxFileLines, and each function or function literal over maxFuncLines
// (counted from its func keyword to its closing brace).
func sizeProblems(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var problems []string
	if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
		problems = append(problems, fmt.Sprintf("%s: %d lines, more than %d", name, n, maxFileLines))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		var what string
		switch fn := n.(type) {
		case *ast.FuncDecl:
			if fn.Body == nil {
				return true
			}
			what = fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				what = "(" + recvType(fn.Recv.List[0].Type) + ")." + what
			}
		case *ast.FuncLit:
			what = "func literal"
		default:
			return true
		}
		start, end := fset.Position(n.Pos()), fset.Position(n.End())
		if lines := end.Line - start.Line + 1; lines > maxFuncLines {
			problems = append(problems, fmt.Sprintf("%s:%d: %s is %d lines, more than %d", name, start.Line, what, lines, maxFuncLines))
		}
		return true
	})
	return problems, nil
}

// recvType spells a method's receiver type: T, *T, T[K].
func recvType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvType(x.X)
	case *ast.IndexListExpr:
		return recvType(x.X)
	}
	return strings.TrimSpace(fmt.Sprintf("%T", e))
}
