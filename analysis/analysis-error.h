/* analysis-error.h: the one error domain of analysis/. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_ANALYSIS_ERROR (datc_analysis_error_quark ())
GQuark datc_analysis_error_quark (void);

typedef enum {
  DATC_ANALYSIS_ERROR_INPUT, /* a file or argument is malformed: FILE:LINE: ... */
  DATC_ANALYSIS_ERROR_LIMIT, /* a size from outside exceeds a named limit */
  DATC_ANALYSIS_ERROR_IO,    /* a file could not be read or written */
  DATC_ANALYSIS_ERROR_DATA,  /* not enough data for what was asked */
} DatcAnalysisError;

G_END_DECLS
