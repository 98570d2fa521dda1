/* analysis-error.c: see analysis-error.h. */
#include "analysis-error.h"

G_DEFINE_QUARK (datc-analysis-error-quark, datc_analysis_error)
