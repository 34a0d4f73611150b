package reactions

import "errors"

func asPosError(err error, pe **PosError) bool { return errors.As(err, pe) }
